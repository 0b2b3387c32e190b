package learningcycle

import (
	"flag"
	"fmt"
)

// The flags every learning-cycle kind shares, added by the first of them.
var flags struct {
	stageAttempts, historyLimit int
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
}

// ValidateFlags checks the flags AddFlags added.
func ValidateFlags() error {
	if flags.stageAttempts < 1 {
		return fmt.Errorf("--stage-attempts %d must be at least 1", flags.stageAttempts)
	}
	if flags.historyLimit < 1 {
		return fmt.Errorf("--cycle-history-limit %d must be at least 1", flags.historyLimit)
	}
	return nil
}

// FlagConfig is the Config the flags set; the defaults when they were never
// added.
func FlagConfig() Config {
	return Config{StageAttempts: int32(flags.stageAttempts), HistoryLimit: flags.historyLimit}
}
