package dijob

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

// leftToV1 says whether the job of key is a v1alpha1 job (its conversion
// marks it so in v2alpha1): the v1 operator's, which does not run yet, so
// this controller makes nothing for it and writes nothing of it.
func (c *Controller) leftToV1(ctx context.Context, key string) bool {
	job, ok, _ := common.ReadOwner(key, c.syncer.Get)
	if !ok || !conversion.IsV1(job) {
		return false
	}
	klog.FromContext(ctx).V(4).Info("Leaving a v1alpha1 DIJob alone", "dijob", key)
	return true
}
