// Package anpconformance runs the conformance suite of sigs.k8s.io/network-policy-api (its
// tests, manifests and profile report, from the Go module proxy) against the cluster of
// $KUBECONFIG. It is upstream's profile runner with one addition: -skip-tests, which the
// report lists as skipped rather than passed (the SCTP tests, on a kernel without SCTP).
//
//	go test -c -o anp-conformance.test . && ./anp-conformance.test -test.v \
//	  -conformance-profiles=ClusterNetworkPolicy -supported-features=... -skip-tests=... -report-output=report.yaml
package anpconformance

import (
	"flag"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	api "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/network-policy-api/conformance/tests"
	"sigs.k8s.io/network-policy-api/conformance/utils/flags"
	"sigs.k8s.io/network-policy-api/conformance/utils/suite"
	"sigs.k8s.io/yaml"
)

var skipTests = flag.String("skip-tests", "", "comma-separated ShortNames of tests the report lists as skipped")

func TestConformanceProfiles(t *testing.T) {
	cfg, err := config.GetConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	clientSet, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	if err := api.Install(c.Scheme()); err != nil {
		t.Fatalf("scheme: %v", err)
	}
	if err := apiextensionsv1.AddToScheme(c.Scheme()); err != nil {
		t.Fatalf("scheme: %v", err)
	}
	impl, err := suite.ParseImplementation(*flags.ImplementationOrganization, *flags.ImplementationProject,
		*flags.ImplementationURL, *flags.ImplementationVersion, *flags.ImplementationContact, *flags.ImplementationAdditionalInformation)
	if err != nil {
		t.Fatalf("implementation: %v", err)
	}
	var skip []string
	if *skipTests != "" {
		skip = strings.Split(*skipTests, ",")
	}
	s, err := suite.NewConformanceProfileTestSuite(suite.ConformanceProfileOptions{
		Options: suite.Options{
			Client: c, ClientSet: clientSet, KubeConfig: *cfg,
			Debug:                      *flags.ShowDebug,
			CleanupBaseResources:       *flags.CleanupBaseResources,
			SupportedFeatures:          suite.ParseSupportedFeatures(*flags.SupportedFeatures),
			ExemptFeatures:             suite.ParseSupportedFeatures(*flags.ExemptFeatures),
			EnableAllSupportedFeatures: *flags.EnableAllSupportedFeatures,
			SkipTests:                  skip,
		},
		Implementation:      *impl,
		ConformanceProfiles: suite.ParseConformanceProfiles(*flags.ConformanceProfiles),
	})
	if err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
	s.Setup(t)
	if err := s.Run(t, tests.ConformanceTests); err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
	report, err := s.Report()
	if err != nil {
		t.Fatalf("conformance report: %v", err)
	}
	raw, err := yaml.Marshal(report)
	if err != nil {
		t.Fatalf("conformance report: %v", err)
	}
	if *flags.ReportOutput != "" {
		if err := os.WriteFile(*flags.ReportOutput, raw, 0o644); err != nil {
			t.Fatalf("conformance report: %v", err)
		}
	}
	t.Logf("conformance report:\n%s", raw)
}
