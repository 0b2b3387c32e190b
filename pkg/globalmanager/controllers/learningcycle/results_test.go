package learningcycle

import (
	"fmt"
	"strings"
	"testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

func TestReportedPathsStayWithinTheOutputDir(t *testing.T) {
	for _, tc := range []struct {
		url, outputDir string
		ok             bool
	}{
		{"/output/round-1/train/model.pb", "/output", true},
		{"/output/round-1/train/model.pb", "/output/", true},
		{"/output", "/output", true}, // a folder: itself mounted
		{"/output/../etc/shadow", "/output", false},
		{"/outputs/model.pb", "/output", false},
		{"/etc/kubernetes", "/output", false},
		{"s3://bucket/out/round-1/model.pb", "s3://bucket/out", true},
		{"/models/m.pb", "s3://bucket/out", false},
		{"/output/" + strings.Repeat("a", MaxReportedURLBytes), "/output", false},
		// A path that looks like a file has its parent mounted.
		{"/data/job.v1", "/data/job.v1", false},
		{"/data/job.v1/.", "/data/job.v1", false},
		{"/data/job.v1/round-1/train/model.pb", "/data/job.v1", true},
		{"/data/job.v1/model.pb", "/data/job.v1", true},
		{"/output/model.pb", "/output", true},
		// The node's root is no outputDir to mount things from.
		{"/etc/kubernetes", "/", false},
		{"/etc/kubernetes", "//.", false},
		{"s3://bucket/" + strings.Repeat("k", 1024), "s3://bucket", true},
	} {
		if why := reportedPath("model url", tc.url, tc.outputDir); (why == "") != tc.ok {
			t.Errorf("reportedPath(%.60q, %q) = %q, want taken: %v", tc.url, tc.outputDir, why, tc.ok)
		}
	}
	many := make([]sednav1.RoundModel, MaxRoundModels+1)
	for i := range many {
		many[i].URL = fmt.Sprintf("/output/round-1/train/task-%d.pkl", i)
	}
	if why := checkModels(many, "/output"); why == "" {
		t.Errorf("%d models taken, want at most %d", len(many), MaxRoundModels)
	}
	if why := checkModels(many[:MaxRoundModels], "/output"); why != "" {
		t.Errorf("%d models refused: %s", MaxRoundModels, why)
	}
}
