package command

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/pkg/version"
)

// VersionFlag is the flag with which every Nereid command prints its version
// and exits 0.
const VersionFlag = "version"

// listedLoggingFlags are the klog flags --help describes: the two an operator
// sets. klog's others (log files, headers, thresholds) still work, but
// Kubernetes' components dropped them from their command lines as rarely
// useful, so --help only names them.
var listedLoggingFlags = map[string]bool{"v": true, "vmodule": true}

// ParseFlags adds --version to fs and parses args. With --version it prints
// the program's name and version to standard output and exits 0; otherwise
// it returns what fs.Parse returns (with flag.ExitOnError, Parse itself exits
// on --help and on a bad flag).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	asked, err := parseFlags(fs, args)
	if err == nil && asked {
		fmt.Fprintln(os.Stdout, VersionLine(fs))
		os.Exit(0)
	}
	return err
}

// parseFlags is ParseFlags without the exit: it says whether --version was given.
func parseFlags(fs *flag.FlagSet, args []string) (versionAsked bool, err error) {
	asked := fs.Bool(VersionFlag, false, "Print the version and exit.")
	err = fs.Parse(args)
	return *asked, err
}

// Program is the name a command goes by in its version and logs:
// nereid-<the flag set's name>.
func Program(fs *flag.FlagSet) string {
	if strings.HasPrefix(fs.Name(), "nereid-") {
		return fs.Name()
	}
	return "nereid-" + fs.Name()
}

// VersionLine is what --version prints: "nereid-globalmanager v0.1.0
// (commit 9ca8f52, go1.26.0)".
func VersionLine(fs *flag.FlagSet) string {
	return Program(fs) + " " + version.Get().String()
}

// PrintFlags prints fs's flags for --help as Kubernetes' components group
// theirs: the command's own first, then klog's under "Logging flags:", where
// only -v and -vmodule are described and the rest named on one line. It is
// the flag.FlagSet.PrintDefaults of a command that called klog.InitFlags(fs).
func PrintFlags(fs *flag.FlagSet) {
	klogs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogs)
	var own, listed []*flag.Flag
	var named []string
	fs.VisitAll(func(f *flag.Flag) {
		// klog.InitFlags registers the same flag.Value in every set, so
		// a flag of fs is klog's when its value is.
		k := klogs.Lookup(f.Name)
		switch {
		case k == nil || k.Value != f.Value:
			own = append(own, f)
		case listedLoggingFlags[f.Name]:
			listed = append(listed, f)
		default:
			named = append(named, "-"+f.Name)
		}
	})
	w := fs.Output()
	printDefaults(w, own)
	if len(listed)+len(named) == 0 {
		return
	}
	fmt.Fprintln(w, "\nLogging flags:")
	printDefaults(w, listed)
	if len(named) > 0 {
		fmt.Fprintln(w, wrap("klog's other flags work too, and are seldom needed: "+strings.Join(named, ", ")+".", 80))
	}
}

// printDefaults prints flags as flag.PrintDefaults does, with the defaults
// they were defined with (not what Parse has set so far).
func printDefaults(w io.Writer, flags []*flag.Flag) {
	group := flag.NewFlagSet("", flag.ContinueOnError)
	group.SetOutput(w)
	for _, f := range flags {
		group.Var(f.Value, f.Name, f.Usage)
		group.Lookup(f.Name).DefValue = f.DefValue
	}
	group.PrintDefaults()
}

// wrap breaks text into lines of at most width columns (but for a longer
// word), indented as a paragraph under a flag group: the first line by two
// spaces, the others by four, so that none reads as a flag's own line.
func wrap(text string, width int) string {
	var b strings.Builder
	line := "  "
	for i, word := range strings.Fields(text) {
		if i > 0 && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = "    " + word
			continue
		}
		if i > 0 {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}
