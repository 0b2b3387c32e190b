package learningcycle

import (
	"flag"
	"fmt"
	"time"
)

// The flags every learning-cycle kind shares, added by the first of them.
var flags struct {
	stageAttempts, historyLimit int
	reportGrace                 time.Duration
}

// AddFlags adds the flags of the learning-cycle kinds to fs, once however
// many kinds ask.
func AddFlags(fs *flag.FlagSet) {
	if fs.Lookup("stage-attempts") != nil {
		return
	}
	fs.IntVar(&flags.stageAttempts, "stage-attempts", DefaultStageAttempts,
		"Tries of a learning-cycle stage (train, eval, deploy) of an incremental or lifelong learning job before the job fails.")
	fs.IntVar(&flags.historyLimit, "cycle-history-limit", DefaultHistoryLimit,
		"Finished rounds of an incremental or lifelong learning job kept in its status.history.")
	fs.DurationVar(&flags.reportGrace, "stage-report-grace", DefaultReportGrace,
		"How long a learning-cycle stage pod that ended without its worker's report waits for the report, while its job's edge link is up, before the try fails.")
}

// ValidateFlags checks the flags AddFlags added.
func ValidateFlags() error {
	if flags.stageAttempts < 1 {
		return fmt.Errorf("--stage-attempts %d must be at least 1", flags.stageAttempts)
	}
	if flags.historyLimit < 1 {
		return fmt.Errorf("--cycle-history-limit %d must be at least 1", flags.historyLimit)
	}
	if flags.reportGrace <= 0 {
		return fmt.Errorf("--stage-report-grace %s must be positive", flags.reportGrace)
	}
	return nil
}

// FlagConfig is the Config the flags set; the defaults when they were never
// added.
func FlagConfig() Config {
	return Config{StageAttempts: int32(flags.stageAttempts), HistoryLimit: flags.historyLimit, ReportGrace: flags.reportGrace}
}
