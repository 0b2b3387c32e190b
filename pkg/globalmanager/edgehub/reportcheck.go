package edgehub

import (
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
)

// A report is checked against what its node runs before it goes into the
// report pipeline (package reports): its object concerns the node, and its
// worker is a pod of that object on the node, reporting from its address.

// checkReport checks a report against what the node runs, and returns the
// key of the object it is about and the report checked; an error refuses
// it. The reader calls it (reports.Config.Check), in the order the reports
// came, once the pipeline has checked its ID.
func (s *session) checkReport(r *edgeproto.Report) (string, *reports.Checked, error) {
	switch r.Kind {
	case edgeproto.ReportWorker:
		return s.checkWorker(r)
	case edgeproto.ReportDataset:
		return s.checkDataset(r)
	}
	return "", nil, edgeproto.Refuse("unknown report kind %q", reports.ClipRefusal(string(r.Kind)))
}

// checkWorker checks a worker's report, for its kind's applier.
func (s *session) checkWorker(r *edgeproto.Report) (string, *reports.Checked, error) {
	info, err := edgeproto.ParseWorkerInfo(r.Body)
	if err != nil {
		return "", nil, edgeproto.Refuse("invalid worker report: %s", err.Error())
	}
	if info.Name != r.Worker {
		// The worker API takes a report only under its body's name; the
		// status records r.Worker, so the two must be the one checked.
		return "", nil, edgeproto.Refuse("the report is of worker %s, its body names %s", edgeproto.ClipName(r.Worker), edgeproto.ClipName(info.Name))
	}
	o := info.Owner()
	obj, k, ok := s.hub.sets.Concerns(s.node, o)
	if !ok {
		return "", nil, edgeproto.Refuse("node %s has no worker in %s %s/%s", s.node, o.Kind, o.Namespace, o.Name)
	}
	if err := s.hub.sets.CheckWorker(s.node, k, obj, info.Name, r.From, r.ReceivedAt); err != nil {
		return "", nil, err
	}
	a := s.hub.appliers[o.Kind]
	if a == nil {
		return "", nil, edgeproto.Refuse("the GlobalManager applies no reports of kind %s", o.Kind)
	}
	about := o.String()
	return "worker/" + about, &reports.Checked{Report: r, About: about, Worker: info, Applier: a}, nil
}

// checkDataset checks a LocalController's count of a Dataset, for the
// dataset applier.
func (s *session) checkDataset(r *edgeproto.Report) (string, *reports.Checked, error) {
	d, err := edgeproto.ParseDatasetReport(r.Body)
	if err != nil {
		return "", nil, edgeproto.Refuse("invalid dataset report: %s", err.Error())
	}
	ref := d.Ref()
	if _, _, ok := s.hub.sets.Concerns(s.node, ref); !ok {
		return "", nil, edgeproto.Refuse("dataset %s/%s is not on node %s", ref.Namespace, ref.Name, s.node)
	}
	if s.hub.datasets == nil {
		return "", nil, edgeproto.Refuse("the GlobalManager applies no dataset reports")
	}
	about := ref.String()
	return "dataset/" + about, &reports.Checked{Report: r, About: about, Dataset: d}, nil
}
