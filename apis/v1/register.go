package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every tabby resource.
const GroupName = "tabby.dev"

// SchemeGroupVersion is group version used to register these objects.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&IPPool{}, &IPPoolList{},
		&BGPConfiguration{}, &BGPConfigurationList{},
		&FelixConfiguration{}, &FelixConfigurationList{},
		&BGPPeer{}, &BGPPeerList{},
		&BGPFilter{}, &BGPFilterList{},
		&IPAMBlock{}, &IPAMBlockList{},
		&BlockAffinity{}, &BlockAffinityList{},
		&IPAMHandle{}, &IPAMHandleList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// Resource names (plural, lower case) as served by the API server.
const (
	ResourceIPPools             = "ippools"
	ResourceBGPConfigurations   = "bgpconfigurations"
	ResourceFelixConfigurations = "felixconfigurations"
	ResourceBGPPeers            = "bgppeers"
	ResourceBGPFilters          = "bgpfilters"
	ResourceIPAMBlocks          = "ipamblocks"
	ResourceBlockAffinities     = "blockaffinities"
	ResourceIPAMHandles         = "ipamhandles"
)
