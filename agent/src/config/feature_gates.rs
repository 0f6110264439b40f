//! `featureGates` (and `--feature-gates`): the gate names Kubernetes 1.32's kubelet knows are
//! accepted, any other name is refused; a gate set to a value whose behaviour dockerlet does
//! not have is refused, with why.
//!
//! The names are kubelet's: `pkg/features/kube_features.go` (and the versioned specs of
//! `pkg/features/versioned_kube_features.go`) of 1.32, the generic API server's
//! (`k8s.io/apiserver/pkg/features`), apiextensions' and controller-manager's gates relisted
//! there, component-base's logging, metrics and zpages gates, and client-go's gates that
//! `kube_features.go` registers. `AllAlpha` and `AllBeta` are the feature-gate library's own.

use std::collections::BTreeMap;
use std::path::Path;

use super::ConfigError;

/// The gates kubelet 1.32 accepts by name.
const KNOWN: &[&str] = &[
    // pkg/features/kube_features.go
    "AllowDNSOnlyNodeCSR",
    "AllowInsecureKubeletCertificateSigningRequests",
    "AllowOverwriteTerminationGracePeriodSeconds",
    "AnyVolumeDataSource",
    "AppArmor",
    "AppArmorFields",
    "AuthorizeNodeWithSelectors",
    "ClusterTrustBundle",
    "ClusterTrustBundleProjection",
    "ContainerCheckpoint",
    "CPUManager",
    "CPUManagerPolicyAlphaOptions",
    "CPUManagerPolicyBetaOptions",
    "CPUManagerPolicyOptions",
    "CronJobsScheduledAnnotation",
    "CrossNamespaceVolumeDataSource",
    "CSIMigrationPortworx",
    "CSIVolumeHealth",
    "CustomCPUCFSQuotaPeriod",
    "DevicePluginCDIDevices",
    "DisableAllocatorDualWrite",
    "DisableCloudProviders",
    "DisableKubeletCloudCredentialProviders",
    "DisableNodeKubeProxyVersion",
    "DRAAdminAccess",
    "DRAResourceClaimDeviceStatus",
    "DynamicResourceAllocation",
    "ElasticIndexedJob",
    "EventedPLEG",
    "ExecProbeTimeout",
    "GracefulNodeShutdown",
    "GracefulNodeShutdownBasedOnPodPriority",
    "HonorPVReclaimPolicy",
    "HPAContainerMetrics",
    "HPAScaleToZero",
    "ImageMaximumGCAge",
    "ImageVolume",
    "InPlacePodVerticalScaling",
    "InPlacePodVerticalScalingAllocatedStatus",
    "InPlacePodVerticalScalingExclusiveCPUs",
    "InTreePluginPortworxUnregister",
    "JobBackoffLimitPerIndex",
    "JobManagedBy",
    "JobPodFailurePolicy",
    "JobPodReplacementPolicy",
    "JobSuccessPolicy",
    "KubeletCgroupDriverFromCRI",
    "KubeletCrashLoopBackOffMax",
    "KubeletFineGrainedAuthz",
    "KubeletInUserNamespace",
    "KubeletPodResourcesDynamicResources",
    "KubeletPodResourcesGet",
    "KubeletRegistrationGetOnExistsOnly",
    "KubeletSeparateDiskGC",
    "KubeletTracing",
    "KubeProxyDrainingTerminatingNodes",
    "LoadBalancerIPMode",
    "LocalStorageCapacityIsolationFSQuotaMonitoring",
    "LogarithmicScaleDown",
    "MatchLabelKeysInPodAffinity",
    "MatchLabelKeysInPodTopologySpread",
    "MaxUnavailableStatefulSet",
    "MemoryManager",
    "MemoryQoS",
    "MultiCIDRServiceAllocator",
    "NFTablesProxyMode",
    "NodeInclusionPolicyInPodTopologySpread",
    "NodeLogQuery",
    "NodeSwap",
    "PDBUnhealthyPodEvictionPolicy",
    "PersistentVolumeLastPhaseTransitionTime",
    "PodAndContainerStatsFromCRI",
    "PodDeletionCost",
    "PodDisruptionConditions",
    "PodHostIPs",
    "PodIndexLabel",
    "PodLevelResources",
    "PodLifecycleSleepAction",
    "PodLifecycleSleepActionAllowZero",
    "PodLogsQuerySplitStreams",
    "PodReadyToStartContainersCondition",
    "PodSchedulingReadiness",
    "PortForwardWebsockets",
    "ProcMountType",
    "QOSReserved",
    "RecoverVolumeExpansionFailure",
    "RecursiveReadOnlyMounts",
    "RelaxedDNSSearchValidation",
    "RelaxedEnvironmentVariableValidation",
    "ReloadKubeletServerCertificateFile",
    "ResourceHealthStatus",
    "RotateKubeletServerCertificate",
    "RuntimeClassInImageCriApi",
    "SchedulerAsyncPreemption",
    "SchedulerQueueingHints",
    "SELinuxChangePolicy",
    "SELinuxMount",
    "SELinuxMountReadWriteOncePod",
    "SeparateTaintEvictionController",
    "ServiceAccountTokenJTI",
    "ServiceAccountTokenNodeBinding",
    "ServiceAccountTokenNodeBindingValidation",
    "ServiceAccountTokenPodNodeInfo",
    "ServiceTrafficDistribution",
    "SidecarContainers",
    "SizeMemoryBackedVolumes",
    "StatefulSetAutoDeletePVC",
    "StatefulSetStartOrdinal",
    "StorageNamespaceIndex",
    "StorageVersionMigrator",
    "SupplementalGroupsPolicy",
    "SystemdWatchdog",
    "TopologyAwareHints",
    "TopologyManagerPolicyAlphaOptions",
    "TopologyManagerPolicyBetaOptions",
    "TopologyManagerPolicyOptions",
    "TranslateStreamCloseWebsocketRequests",
    "UnknownVersionInteroperabilityProxy",
    "UserNamespacesPodSecurityStandards",
    "UserNamespacesSupport",
    "VolumeAttributesClass",
    "VolumeCapacityPriority",
    "WinDSR",
    "WindowsCPUAndMemoryAffinity",
    "WindowsGracefulNodeShutdown",
    "WindowsHostNetwork",
    "WinOverlay",
    // k8s.io/apiserver/pkg/features (relisted in versioned_kube_features.go)
    "AdmissionWebhookMatchConditions",
    "AggregatedDiscoveryEndpoint",
    "AnonymousAuthConfigurableEndpoints",
    "APIListChunking",
    "APIResponseCompression",
    "APIServerIdentity",
    "APIServerTracing",
    "APIServingWithRoutine",
    "AuthorizeWithSelectors",
    "BtreeWatchCache",
    "CBORServingAndStorage",
    "ConcurrentWatchObjectDecode",
    "ConsistentListFromCache",
    "CoordinatedLeaderElection",
    "EfficientWatchResumption",
    "KMSv1",
    "MutatingAdmissionPolicy",
    "OpenAPIEnums",
    "RemainingItemCount",
    "ResilientWatchCacheInitialization",
    "RetryGenerateName",
    "SeparateCacheWatchRPC",
    "StorageVersionAPI",
    "StorageVersionHash",
    "StrictCostEnforcementForVAP",
    "StrictCostEnforcementForWebhooks",
    "StructuredAuthenticationConfiguration",
    "StructuredAuthorizationConfiguration",
    "UnauthenticatedHTTP2DOSMitigation",
    "WatchBookmark",
    "WatchCacheInitializationPostStartHook",
    "WatchFromStorageWithoutResourceVersion",
    "WatchList",
    "ZeroLimitedNominalConcurrencyShares",
    // apiextensions-apiserver and controller-manager (relisted there)
    "CRDValidationRatcheting",
    "CustomResourceFieldSelectors",
    "CloudControllerManagerWebhook",
    // component-base: logs, metrics, zpages
    "ContextualLogging",
    "LoggingAlphaOptions",
    "LoggingBetaOptions",
    "ComponentSLIs",
    "ComponentFlagz",
    "ComponentStatusz",
    // client-go (registered by kube_features.go's init)
    "ClientsAllowCBOR",
    "ClientsPreferCBOR",
    "InformerResourceVersion",
    "WatchListClient",
    // the feature-gate library
    "AllAlpha",
    "AllBeta",
];

/// Gates whose other value asks for behaviour dockerlet does not have: the one value
/// accepted, and why.
const FIXED: &[(&str, bool, &str)] = &[
    ("AllAlpha", false, "it turns on alpha features dockerlet does not have"),
    ("AllBeta", false, "it turns on beta features dockerlet does not have"),
    (
        "SidecarContainers",
        true,
        "restartable init containers always run as sidecars",
    ),
    (
        "PodReadyToStartContainersCondition",
        true,
        "the PodReadyToStartContainers condition is always reported",
    ),
    (
        "KubeletCgroupDriverFromCRI",
        true,
        "the cgroup driver is Docker's unless cgroupDriver is set",
    ),
    (
        "UserNamespacesSupport",
        false,
        "Docker cannot give a pod its own user namespace",
    ),
    ("MemoryQoS", false, "dockerlet sets no memory.high or memory.min"),
    (
        "InPlacePodVerticalScaling",
        false,
        "dockerlet does not resize running pods",
    ),
    ("ImageVolume", false, "dockerlet has no image volumes"),
    ("PodLevelResources", false, "dockerlet has no pod-level resources"),
    (
        "DynamicResourceAllocation",
        false,
        "dockerlet has no dynamic resource allocation",
    ),
    (
        "LocalStorageCapacityIsolationFSQuotaMonitoring",
        false,
        "dockerlet measures ephemeral storage by walking it, not with project quotas",
    ),
    (
        "QOSReserved",
        false,
        "dockerlet reserves nothing for Guaranteed pods in the QoS cgroups",
    ),
    ("NodeLogQuery", false, "dockerlet serves no node logs (/logs/)"),
    (
        "CustomCPUCFSQuotaPeriod",
        false,
        "the CFS quota period is always 100ms (cpuCFSQuotaPeriod)",
    ),
];

/// Checks the gates (from the file, or merged with `--feature-gates`): every name known and
/// every value one dockerlet has.
fn check_gates(gates: &BTreeMap<String, bool>, refuse: &dyn Fn(String) -> ConfigError) -> Result<(), ConfigError> {
    for (name, value) in gates {
        if !KNOWN.contains(&name.as_str()) {
            return Err(refuse(format!(
                "unrecognized feature gate: {name} (not a Kubernetes 1.32 feature gate)"
            )));
        }
        if let Some((_, _, why)) = FIXED.iter().find(|(gate, only, _)| gate == name && only != value) {
            return Err(refuse(format!("{name}={value} is not supported by dockerlet ({why})")));
        }
    }
    Ok(())
}

/// The file's `featureGates`, checked; errors name the file.
pub(super) fn check(path: &Path, gates: BTreeMap<String, bool>) -> Result<BTreeMap<String, bool>, ConfigError> {
    check_gates(&gates, &|reason| ConfigError::File {
        path: path.display().to_string(),
        reason: format!("featureGates: {reason}"),
    })?;
    Ok(gates)
}

/// `--feature-gates` (kubelet's `Key=bool,Key2=bool`) merged over the file's gates, as
/// kubelet merges them (the flag's value wins per gate); errors name the flag.
pub(super) fn merge_flag(file: BTreeMap<String, bool>, flag: &[String]) -> Result<BTreeMap<String, bool>, ConfigError> {
    let refuse = |reason: String| ConfigError::Invalid {
        setting: "--feature-gates".into(),
        reason,
    };
    let mut gates = file;
    for pair in flag
        .iter()
        .flat_map(|f| f.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| refuse(format!("missing bool value for {pair}")))?;
        let value = match value.trim() {
            "true" | "True" | "TRUE" | "t" | "T" | "1" => true,
            "false" | "False" | "FALSE" | "f" | "F" | "0" => false,
            other => return Err(refuse(format!("invalid value of {name}={other}, err: not a bool"))),
        };
        gates.insert(name.trim().to_string(), value);
    }
    check_gates(&gates, &refuse)?;
    Ok(gates)
}
