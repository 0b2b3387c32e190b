package replicasapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// profilingsRequest is the body of POST profilings.
type profilingsRequest struct {
	// Data is the job's report of its own performance, a JSON object.
	Data json.RawMessage `json:"data"`
}

// postProfilings stores the reported object in the job's status.profilings.
func (s *Server) postProfilings(ctx context.Context, w http.ResponseWriter, r *http.Request, job *div2alpha1.DIJob) *reply {
	var req profilingsRequest
	if rep := s.readJSON(w, r, &req); rep != nil {
		return rep
	}
	data := bytes.TrimSpace(req.Data)
	if len(data) == 0 || data[0] != '{' {
		return fail(http.StatusBadRequest, `the request body needs "data", a JSON object`)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return fail(http.StatusBadRequest, `"data" is not valid JSON: %v`, err)
	}
	raw := compact.Bytes()
	if rep := s.writeTurn(ctx); rep != nil {
		return rep
	}

	var refusal *reply
	attempt := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.latest(ctx, job, attempt)
		attempt++
		if err != nil {
			return err
		}
		if cur.UID != job.UID {
			refusal = fail(http.StatusConflict, "DIJob %s was deleted and created again while the request was handled", klog.KObj(cur))
			return nil
		}
		if !common.RunByNereid(cur) {
			refusal = runByAnother(cur)
			return nil
		}
		if p := cur.Status.Profilings; p != nil && bytes.Equal(p.Raw, raw) {
			return nil
		}
		update := cur.DeepCopy()
		update.Status.Profilings = &runtime.RawExtension{Raw: raw}
		_, err = s.cfg.DI.DiengineV2alpha1().DIJobs(cur.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
		return err
	})
	if refusal != nil {
		return refusal
	}
	if err != nil {
		return writeFailure(err, job, "the profilings could not be stored")
	}
	return ok("successfully report profilings", nil)
}
