// Package all links in every kind the GlobalManager serves: each package
// below registers its kind in package kinds when it is imported. Adding a
// kind is its package and one line here.
package all

import (
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/register"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/incrementallearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/jointinference"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/lifelonglearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/protection"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/datasetstatus"
)
