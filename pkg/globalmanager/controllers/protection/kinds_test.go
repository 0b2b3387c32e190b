package protection

// The Model protection's tests run with the kinds that name Models, as they
// register themselves.
import (
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/incrementallearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/jointinference"
)
