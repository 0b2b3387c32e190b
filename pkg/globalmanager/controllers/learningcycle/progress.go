package learningcycle

import (
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Progress is what the per-job gauges export of a learning cycle: its
// stage, that stage's state, its round, and the evaluation of the newest
// evaluated round's model (the current round's once evaluated, else the
// last finished round's).
func Progress(c *sednav1.CycleStatus) kinds.Progress {
	p := kinds.Progress{Stage: string(c.Stage), State: string(c.State), Round: c.Round, HasRound: true}
	evaluated := func(r *sednav1.RoundStatus) []sednav1.Metric {
		// The eval stage records its results on the round's first model,
		// the one it trained (machine.evaluated).
		if r == nil || len(r.Models) == 0 {
			return nil
		}
		return r.Models[0].Metrics
	}
	p.Metrics = evaluated(c.CurrentRound)
	for i := len(c.History) - 1; i >= 0 && len(p.Metrics) == 0; i-- {
		p.Metrics = evaluated(&c.History[i])
	}
	return p
}
