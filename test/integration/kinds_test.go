package integration

// The tests compare what LocalControllers hold with desired.Digest, which
// reads how each kind travels from the table of kinds: every kind is linked
// in, as in the GlobalManager.
import _ "github.com/nereid-ml/nereid/pkg/globalmanager/kinds/all"
