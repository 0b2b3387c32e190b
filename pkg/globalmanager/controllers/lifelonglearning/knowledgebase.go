package lifelonglearning

import (
	"context"
	"encoding/json"
	"path"

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
	if o.Move == learningcycle.MoveTrainCompleted {
		learn(kb, info.Results, o.Round.NumberOfSamples)
	}
	return nil, nil
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
