// Package controllers holds igw's reconcilers, one per kind. Rendering of child
// objects is kept in pure functions (package render); the reconcilers apply,
// own and report. Each reconcile records what it observed and did, and a pure
// status function (routeStatus, configStatus, globalStatus) turns that and the
// reconcile's error into the status, which is written on every path: a failure
// shows in a condition as well as in the backoff. One frame, reconcileOwner,
// does this for every kind. Condition types and reasons live in api/v1alpha1.
package controllers

// The manager reads its own kinds, writes their status, and keeps a finalizer on
// configs whose Gateway lives in another namespace; setting blockOwnerDeletion
// on a child needs update on its owner's finalizers.
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=inferencegatewayconfigs;modelroutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=inferencegatewayconfigs,verbs=patch
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=inferencegatewayconfigs/status;modelroutes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=inferencegatewayconfigs/finalizers;modelroutes/finalizers,verbs=update
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=globalinferencegateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=globalinferencegateways/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=globalinferencegateways/finalizers,verbs=update
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// What it observes: the model server pods and their nodes (for accelerator types),
// and CRDs, to notice Gateway API, the inference extension or Envoy Gateway being installed.
// +kubebuilder:rbac:groups=core,resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Whether the Secrets a GlobalInferenceGateway's members name exist: get
// only, of their metadata; the global picker's pods mount them, the operator
// never lists, watches or copies them.
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get

// The children it owns.
// +kubebuilder:rbac:groups=core,resources=configmaps;services;serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=inference.networking.k8s.io,resources=inferencepools,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=inference.networking.k8s.io,resources=inferencepools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes;referencegrants;backendtlspolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=backends;backendtrafficpolicies;clienttrafficpolicies;envoyextensionpolicies;httproutefilters;securitypolicies,verbs=get;list;watch;create;update;patch;delete

// What it grants: Kubernetes lets a Role grant only permissions its writer
// holds. A multi-replica picker's Role lets it get, update and create its
// leader election Lease, so the operator must hold those verbs on Leases in
// every namespace it renders into (it never uses them there itself).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update
