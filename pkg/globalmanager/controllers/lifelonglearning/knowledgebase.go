package lifelonglearning

import (
	"context"
	"encoding/json"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
)

// MaxKnowledgeBaseModels bounds the models the status lists: the newest are kept.
const MaxKnowledgeBaseModels = 100

// Applied keeps the knowledge base summary: the unseen samples any report
// counts, and the models and classes a completed train stage added.
func (k *kind) Applied(_ context.Context, job *sednav1.LifelongLearningJob, info *edgeproto.WorkerInfo, o learningcycle.Outcome) ([]common.Event, error) {
	kb := &job.Status.KnowledgeBase
	if n, ok := learningcycle.OwnerInfoInt(info.OwnerInfo, "numberOfUnseenSample"); ok {
		kb.Samples.NumberOfUnseenSample = n
	}
	if n, ok := learningcycle.OwnerInfoInt(info.OwnerInfo, "numberOfLabeledUnseenSample"); ok {
		kb.Samples.NumberOfLabeledUnseenSample = n
	}
	switch o.Move {
	case learningcycle.MoveTrainCompleted:
		learn(kb, info.Results, o.Round.NumberOfSamples)
	case learningcycle.MoveEvaluated:
		if len(o.Round.Models) > 0 {
			if p, ok := precisionOf(o.Round.Models[0].Metrics); ok {
				judged(kb, o.Round.Models, p)
			}
		}
	}
	return nil, nil
}

// precisionOf is the precision among an eval worker's metrics: the metric
// named precision, else the first (by name) whose name has precision in it
// (Sedna's examples evaluate with sklearn's precision_score); a list value
// (one per class or task) is averaged.
func precisionOf(metrics []sednav1.Metric) (float64, bool) {
	var named []sednav1.Metric
	for _, m := range metrics {
		if strings.Contains(strings.ToLower(m.Key), "precision") {
			named = append(named, m)
		}
	}
	slices.SortFunc(named, func(a, b sednav1.Metric) int {
		exactA, exactB := strings.EqualFold(a.Key, "precision"), strings.EqualFold(b.Key, "precision")
		if exactA != exactB {
			if exactA {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	for _, m := range named {
		if p, ok := average(m.Value); ok {
			return p, true
		}
	}
	return 0, false
}

// average is a metric value's number, or the mean of its list of numbers.
func average(value string) (float64, bool) {
	if p, ok := learningcycle.Number(json.RawMessage(strconv.Quote(value))); ok {
		return p, true
	}
	var list []float64
	if json.Unmarshal([]byte(value), &list) != nil || len(list) == 0 {
		return 0, false
	}
	var sum float64
	for _, v := range list {
		sum += v
	}
	return sum / float64(len(list)), !math.IsNaN(sum) && !math.IsInf(sum, 0)
}

// judged gives the knowledge base's models of the round, found by the
// name learn gave a model without a modelID, the precision the eval worker
// measured of them: Sedna's train worker reports its knowledge base index
// without metrics, and its eval worker judges the whole index.
func judged(kb *sednav1.KnowledgeBase, round []sednav1.RoundModel, precision float64) {
	names := sets.New[string]()
	for _, m := range round {
		names.Insert(path.Base(m.URL))
	}
	for i := range kb.AIModels.ListOfAIModels {
		if m := &kb.AIModels.ListOfAIModels[i]; names.Has(m.ModelID) {
			m.AveragePrecision = precision
		}
	}
}

// learn adds a train worker's results to the knowledge base: each model with
// a url (its modelID, or the url's base name; a model of the same id is
// replaced), and the classes of every result.
func learn(kb *sednav1.KnowledgeBase, results []json.RawMessage, samples int32) {
	models := kb.AIModels.ListOfAIModels
	classes := sets.New(kb.AIClasses.ListOfAIClasses...)
	for _, raw := range results {
		r, ok := learningcycle.ParseResult(raw)
		if !ok {
			continue
		}
		classes.Insert(r.Strings("classes")...)
		if r.URL == "" {
			continue
		}
		m := sednav1.AIModel{ModelID: r.String("modelID"), NumberOfTrainSamples: samples}
		if m.ModelID == "" {
			m.ModelID = path.Base(r.URL)
		}
		if p, ok := learningcycle.Number(r.Metrics["precision"]); ok {
			m.AveragePrecision = p
		}
		kept := models[:0:0]
		for _, old := range models {
			if old.ModelID != m.ModelID {
				kept = append(kept, old)
			}
		}
		models = append(kept, m)
	}
	if extra := len(models) - MaxKnowledgeBaseModels; extra > 0 {
		models = models[extra:]
	}
	kb.AIModels.ListOfAIModels = models
	kb.AIModels.NumberOfAIModels = int32(len(models))
	kb.AIClasses.ListOfAIClasses = sets.List(classes)
	kb.AIClasses.NumberOfAIClasses = int32(classes.Len())
}
