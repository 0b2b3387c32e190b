// Package dataset counts the samples of the Datasets on the LocalController's
// node and reports the count to the GlobalManager when it changes.
package dataset

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// The index file formats Sedna's Datasets use.
const (
	// FormatTXT is one sample per line.
	FormatTXT = "txt"
	// FormatCSV is one sample per row after a header line.
	FormatCSV = "csv"
)

// Count returns how many samples the index file at path holds: its non-empty
// lines for txt, its non-empty rows after the header for csv. A line of only
// white space is empty.
func Count(path, format string) (int32, error) {
	n := 0
	if _, err := read(path, format, func(string) { n++ }); err != nil {
		return 0, err
	}
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("%d samples, more than a count can say", n)
	}
	return int32(n), nil
}

// Samples returns the samples of the index file at path in file order, as
// Count counts them, each without its line ending, and for csv the header line
// (empty for txt). A row is a line: a quoted field spanning lines is not
// supported.
func Samples(path, format string) (header string, samples []string, err error) {
	header, err = read(path, format, func(s string) { samples = append(samples, s) })
	if err != nil {
		return "", nil, err
	}
	return header, samples, nil
}

// read calls sample with each sample of the index file in order and returns
// the csv header. It is the one reader behind Count and Samples, so the two
// never disagree on what a sample is.
func read(path, format string, sample func(string)) (string, error) {
	if format != FormatTXT && format != FormatCSV {
		return "", fmt.Errorf("unknown dataset format %q: want %s or %s", format, FormatTXT, FormatCSV)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// A bufio.Reader, not a Scanner: a sample line has no length limit.
	r := bufio.NewReader(f)
	var (
		header     string
		haveHeader = format == FormatTXT
	)
	for {
		line, err := r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) != "" {
			if haveHeader {
				sample(line)
			} else {
				// The header is the first line that is not blank.
				header, haveHeader = line, true
			}
		}
		if err != nil { // io.EOF
			return header, nil
		}
	}
}
