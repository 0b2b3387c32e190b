package integration

import "testing"

// TestCRDChangersInTurn runs, one after another but beside the other
// parallel tests, the tests that change the cluster's CRDs: they point the
// DIJob CRD's conversion webhook at their GlobalManager (which patches it
// again every minute) or apply the CRDs, and each expects the CRD to say what
// it set; a Helm release's GlobalManager does the same, and the release
// also binds the chart's fixed 0.0.0.0:8080 and di-system. (Its file's name
// sorts early, so that it starts among the first: it is the longest.) Run
// one with go test -run 'InTurn/<its name>'.
func TestCRDChangersInTurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"ChartObjectsAreValidForTheAPIServer", testChartObjectsAreValidForTheAPIServer},
		{"HelmInstallMakesMonitoringObjectsWhereTheirKindsAreServed", testHelmInstallMakesMonitoringObjectsWhereTheirKindsAreServed},
		{"PlainManifestsApplyAgainAfterTheGlobalManagerPointsTheDIJobCRD", testPlainManifestsApplyAgainAfterTheGlobalManagerPointsTheDIJobCRD},
		{"InstallWithHelmRunsTheFederatedExampleThroughTheChartsIdentities", testInstallWithHelmRunsTheFederatedExampleThroughTheChartsIdentities},
		{"DIJobV1alpha1IsServedBesideV2alpha1", testDIJobV1alpha1IsServedBesideV2alpha1},
		{"DIJobV1alpha1RunsAsDIOrchestratorV022", testDIJobV1alpha1RunsAsDIOrchestratorV022},
		{"DIJobV1ServerScalesTheJobOfTheCoordinatorThatAsks", testDIJobV1ServerScalesTheJobOfTheCoordinatorThatAsks},
		{"DIJobV1SaysWhichPodCannotBePlaced", testDIJobV1SaysWhichPodCannotBePlaced},
		{"DIJobV1SaysWhyAReplicaWasNotMade", testDIJobV1SaysWhyAReplicaWasNotMade},
		{"DIJobV1ServerPlacesDDPLearnersOnFreeGPUs", testDIJobV1ServerPlacesDDPLearnersOnFreeGPUs},
		{"DIJobV1LosesNothingWhenTheGlobalManagerRestarts", testDIJobV1LosesNothingWhenTheGlobalManagerRestarts},
		{"DIJobV1CollectorOnAnEdgeNodeSaysWhenItsLinkIsDown", testDIJobV1CollectorOnAnEdgeNodeSaysWhenItsLinkIsDown},
	} {
		t.Run(tc.name, tc.test)
	}
}
