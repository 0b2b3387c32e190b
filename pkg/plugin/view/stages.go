package view

import sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"

// StageRound is the Stage of a finished round as a whole: the history
// keeps a round's start and completion, not its stages' times.
const StageRound = "Round"

// stages is a learning cycle's time line, built from what its status keeps:
//
//   - each finished round of status.history is one entry, Stage "Round",
//     State its result (Deployed, NotDeployed, Failed), from its startTime
//     (when the train trigger fired) to its completionTime;
//   - the current round (status.round) is one entry per stage it went
//     through, from status.conditions (the current round's transitions,
//     each with its time): a stage starts at its first transition and ends
//     at the next stage's first; its State is its last transition's; the
//     train trigger's wait (Train Waiting) is an entry of its own. The last
//     entry has no end while it runs, and ends at status.completionTime
//     when the job failed.
//
// A round both in the history and in the conditions (the one a failed job
// ended in) is shown by its stages.
func stages(c *cycle) []Stage {
	current := currentStages(c)
	var out []Stage
	for _, r := range c.status.History {
		if r.StartTime == nil || (len(current) > 0 && r.Round == c.status.Round) {
			continue
		}
		s := Stage{Round: r.Round, Stage: StageRound, State: r.Result, Start: r.StartTime.UTC()}
		if r.CompletionTime != nil {
			end := r.CompletionTime.UTC()
			s.End = &end
		}
		out = append(out, s)
	}
	return append(out, current...)
}

// currentStages are the current round's stages from its transitions.
func currentStages(c *cycle) []Stage {
	var out []Stage
	for _, t := range c.stages {
		at := t.LastTransitionTime.UTC()
		waiting := t.Type == sednav1.StageWaiting
		if n := len(out); n > 0 && out[n-1].Stage == string(t.Stage) && (out[n-1].State == string(sednav1.StageWaiting)) == waiting {
			out[n-1].State = string(t.Type)
			continue
		}
		if n := len(out); n > 0 {
			out[n-1].End = &at
		}
		out = append(out, Stage{Round: c.status.Round, Stage: string(t.Stage), State: string(t.Type), Start: at})
	}
	if n := len(out); n > 0 && c.completion != nil {
		end := c.completion.UTC()
		out[n-1].End = &end
	}
	return out
}
