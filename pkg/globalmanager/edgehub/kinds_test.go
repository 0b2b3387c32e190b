package edgehub

// The hub's tests run with the kinds the GlobalManager sends to the edge, as
// they register themselves (their packages do not import the hub).
import (
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/incrementallearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/jointinference"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/lifelonglearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/model"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/datasetstatus"
)
