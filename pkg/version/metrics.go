package version

import "github.com/prometheus/client_golang/prometheus"

// BuildInfoName is the name of the gauge BuildInfoCollector exports.
const BuildInfoName = "nereid_build_info"

// BuildInfoCollector is the gauge nereid_build_info{version, revision,
// go_version}, always 1, of this binary's version (Get): the GlobalManager
// and the LocalController register it, so that a dashboard can say which
// build each runs and an alert can tell a fleet running mixed versions.
func BuildInfoCollector() prometheus.Collector { return buildInfo(Get()) }

func buildInfo(i Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: BuildInfoName,
		Help: "A metric with a constant 1 whose labels say which build of Nereid this is: its version, the git revision it was built from and the Go toolchain that built it.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "revision": i.Commit, "go_version": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}
