package register

import (
	"testing"
)

func TestV1ServerFlagsAreChecked(t *testing.T) {
	const ag = "di-system/aggregator-config"
	cases := map[string]struct {
		flags   v1ServerFlags
		wantErr string
	}{
		"off, DI's defaults":          {flags: v1ServerFlags{url: DefaultV1ServerURL, aggregatorConfig: ag}},
		"served":                      {flags: v1ServerFlags{address: ":8080", url: "r-di-v1-server.ml:8080", aggregatorConfig: ag}},
		"an address without port":     {flags: v1ServerFlags{address: "0.0.0.0", url: DefaultV1ServerURL, aggregatorConfig: ag}, wantErr: "--di-v1-server-address"},
		"a URL with a scheme":         {flags: v1ServerFlags{url: "http://di-server:8080", aggregatorConfig: ag}, wantErr: "--di-v1-server-url"},
		"a URL without port":          {flags: v1ServerFlags{url: "di-server.di-system", aggregatorConfig: ag}, wantErr: "--di-v1-server-url"},
		"an AggregatorConfig name":    {flags: v1ServerFlags{url: DefaultV1ServerURL, aggregatorConfig: "aggregator-config"}, wantErr: "--di-aggregator-config"},
		"an AggregatorConfig of none": {flags: v1ServerFlags{url: DefaultV1ServerURL, aggregatorConfig: "Di_System/x"}, wantErr: "--di-aggregator-config"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkValidate(t, tc.flags.validate(), tc.wantErr)
		})
	}
}
