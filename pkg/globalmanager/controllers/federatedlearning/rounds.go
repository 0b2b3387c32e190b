package federatedlearning

import (
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// setRounds sums up the edge nodes' rounds (edgeNodes[].round, each the
// round of the node's last report) into the job's round, the fastest
// node's, and the slowest node's round, the ROUND and SLOWEST columns. Nodes
// whose last report named no round are left out; with none left, the
// fields are cleared. It runs on each report applied, so the summary goes in
// the status write that records the reports, and costs no write of its own.
func setRounds(status *sednav1.FederatedLearningJobStatus) {
	status.Round, status.SlowestRound, status.FastestNode, status.SlowestNode = 0, 0, "", ""
	// edgeNodes is sorted by name: the first node of a round wins a tie.
	for _, n := range status.EdgeNodes {
		if n.Round <= 0 {
			continue
		}
		if status.FastestNode == "" || n.Round > status.Round {
			status.Round, status.FastestNode = n.Round, n.Name
		}
		if status.SlowestNode == "" || n.Round < status.SlowestRound {
			status.SlowestRound, status.SlowestNode = n.Round, n.Name
		}
	}
}
