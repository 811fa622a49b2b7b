package podrules

// FieldSupport is what berth does with a pod field.
type FieldSupport string

const (
	// Honoured fields work as under a kubelet.
	Honoured FieldSupport = "honoured"
	// Rejected fields make the pod Unsupported, with the reason, when set.
	Rejected FieldSupport = "rejected"
	// Ignored fields are accepted and have no effect on a standalone node.
	Ignored FieldSupport = "ignored"
)

// fieldEntry is berth's answer for one field, and why or how.
type fieldEntry struct {
	support FieldSupport
	note    string
}

// podFields is berth's registry of the Kubernetes pod fields: every field
// of PodSpec, Container (init and app containers alike), EnvVarSource,
// VolumeSource, PodSecurityContext, SecurityContext, Lifecycle and
// VolumeMount, keyed by its path. The supported volume types come from
// it (supportedVolumes), docs/pod-fields.md's table of fields is generated
// from it (fields_table.go), and a test fails when k8s.io/api gains a
// field the registry does not classify.
var podFields = map[string]fieldEntry{
	"spec.volumes":                       {Honoured, "the types below"},
	"spec.initContainers":                {Honoured, "in order; `restartPolicy: Always` makes a sidecar"},
	"spec.containers":                    {Honoured, ""},
	"spec.ephemeralContainers":           {Rejected, "added through an API server; a manifest cannot declare them"},
	"spec.restartPolicy":                 {Honoured, ""},
	"spec.terminationGracePeriodSeconds": {Honoured, ""},
	"spec.activeDeadlineSeconds":         {Ignored, "validated only"},
	"spec.dnsPolicy":                     {Honoured, "`ClusterFirst` uses `--cluster-dns` when set, else the host's resolver"},
	"spec.nodeSelector":                  {Ignored, "no scheduler: a static pod runs on its node"},
	"spec.serviceAccountName":            {Rejected, "tokens come from an API server; accepted with `automountServiceAccountToken: false`"},
	"spec.serviceAccount":                {Rejected, "as `serviceAccountName`"},
	"spec.automountServiceAccountToken":  {Honoured, "`false` lets a service account name through"},
	"spec.nodeName":                      {Honoured, "set to the node's name"},
	"spec.hostNetwork":                   {Honoured, ""},
	"spec.hostPID":                       {Honoured, ""},
	"spec.hostIPC":                       {Honoured, ""},
	"spec.shareProcessNamespace":         {Honoured, ""},
	"spec.securityContext":               {Honoured, "the fields below"},
	"spec.imagePullSecrets":              {Honoured, "local Secrets of type `kubernetes.io/dockerconfigjson` or `dockercfg`; also the node's `config.json` as the kubelet searches it"},
	"spec.hostname":                      {Honoured, ""},
	"spec.subdomain":                     {Honoured, ""},
	"spec.affinity":                      {Ignored, "no scheduler"},
	"spec.schedulerName":                 {Ignored, "no scheduler"},
	"spec.tolerations":                   {Ignored, "no scheduler, no taints"},
	"spec.hostAliases":                   {Honoured, "in the managed `/etc/hosts`"},
	"spec.priorityClassName":             {Honoured, "`system-node-critical` and `system-cluster-critical` set `priority`"},
	"spec.priority":                      {Honoured, "orders pod starts (highest first) and graceful node shutdown (lowest first, critical last); validated against `priorityClassName`"},
	"spec.dnsConfig":                     {Honoured, ""},
	"spec.readinessGates":                {Ignored, "no controller sets their conditions"},
	"spec.runtimeClassName":              {Honoured, "taken as the CRI runtime handler's name (no RuntimeClass objects)"},
	"spec.enableServiceLinks":            {Ignored, "no Services"},
	"spec.preemptionPolicy":              {Ignored, "no scheduler"},
	"spec.overhead":                      {Honoured, "added to the sandbox's resources"},
	"spec.topologySpreadConstraints":     {Ignored, "no scheduler"},
	"spec.setHostnameAsFQDN":             {Honoured, ""},
	"spec.os":                            {Ignored, "Linux only"},
	"spec.hostUsers":                     {Honoured, "`false` (KEP-127): own user namespace, 65536 IDs per pod; needs containerd >= 2.0 with runc >= 1.2, refused with the reason otherwise"},
	"spec.schedulingGates":               {Ignored, "no scheduler"},
	"spec.resourceClaims":                {Rejected, "dynamic resource allocation needs an API server and a DRA driver"},
	"spec.resources":                     {Ignored, "pod-level resources are not applied yet"},
	"spec.hostnameOverride":              {Ignored, "not applied yet"},
	"spec.schedulingGroup":               {Ignored, "no scheduler"},
	"spec.evictionResponders":            {Ignored, "no eviction"},

	"spec.containers[*].name":                     {Honoured, ""},
	"spec.containers[*].image":                    {Honoured, ""},
	"spec.containers[*].command":                  {Honoured, "`$(VAR)` expanded as the kubelet does"},
	"spec.containers[*].args":                     {Honoured, "`$(VAR)` expanded as the kubelet does"},
	"spec.containers[*].workingDir":               {Honoured, ""},
	"spec.containers[*].ports":                    {Honoured, "`hostPort` through CNI portmap; one host port twice in a pod refuses it, as the API server does; a host port another pod claims too is a warning on the later pod, and both run"},
	"spec.containers[*].envFrom":                  {Honoured, "ConfigMaps and Secrets of the pod's own source and namespace"},
	"spec.containers[*].env":                      {Honoured, "in order; `$(VAR)` refers to earlier variables, `$$` escapes, unknown references stay as written"},
	"spec.containers[*].resources":                {Honoured, ""},
	"spec.containers[*].resizePolicy":             {Ignored, "an edited manifest restarts the pod"},
	"spec.containers[*].restartPolicy":            {Honoured, "init containers: `Always` (sidecars); any container with `restartPolicyRules` (KEP-5307)"},
	"spec.containers[*].restartPolicyRules":       {Honoured, "exit-code rules, `Restart` and `RestartAllContainers` (KEP-5307, KEP-5532)"},
	"spec.containers[*].volumeMounts":             {Honoured, "the fields below"},
	"spec.containers[*].volumeDevices":            {Ignored, "block volumes need a claim, which is rejected"},
	"spec.containers[*].livenessProbe":            {Honoured, ""},
	"spec.containers[*].readinessProbe":           {Honoured, ""},
	"spec.containers[*].startupProbe":             {Honoured, ""},
	"spec.containers[*].lifecycle":                {Honoured, "the fields below"},
	"spec.containers[*].terminationMessagePath":   {Honoured, ""},
	"spec.containers[*].terminationMessagePolicy": {Honoured, ""},
	"spec.containers[*].imagePullPolicy":          {Honoured, "with the kubelet's back-off"},
	"spec.containers[*].securityContext":          {Honoured, "the fields below"},
	"spec.containers[*].stdin":                    {Honoured, ""},
	"spec.containers[*].stdinOnce":                {Honoured, ""},
	"spec.containers[*].tty":                      {Honoured, ""},

	"spec.containers[*].env[*].valueFrom.fieldRef":         {Honoured, "the fields a kubelet resolves without an API server"},
	"spec.containers[*].env[*].valueFrom.resourceFieldRef": {Honoured, "unset limits are the node's allocatable"},
	"spec.containers[*].env[*].valueFrom.configMapKeyRef":  {Honoured, "a ConfigMap of the pod's own source and namespace"},
	"spec.containers[*].env[*].valueFrom.secretKeyRef":     {Honoured, "a Secret of the pod's own source and namespace"},
	"spec.containers[*].env[*].valueFrom.fileKeyRef":       {Honoured, "KEP-3721: a key of an env file (`NAME='value'` lines, at most 64 KiB) in an emptyDir, read when the container starts, never through a link out of the volume"},

	"spec.containers[*].lifecycle.postStart":  {Honoured, "exec, httpGet, tcpSocket, sleep"},
	"spec.containers[*].lifecycle.preStop":    {Honoured, "exec, httpGet, tcpSocket, sleep"},
	"spec.containers[*].lifecycle.stopSignal": {Honoured, "needs `spec.os.name`; berth delivers it itself (containerd 1.6 to 2.1 ignore CRI's)"},

	"spec.containers[*].volumeMounts[*].name":              {Honoured, ""},
	"spec.containers[*].volumeMounts[*].readOnly":          {Honoured, "image volumes are always read-only"},
	"spec.containers[*].volumeMounts[*].recursiveReadOnly": {Ignored, "not applied yet"},
	"spec.containers[*].volumeMounts[*].mountPath":         {Honoured, ""},
	"spec.containers[*].volumeMounts[*].subPath":           {Honoured, "kept inside the volume (links followed only inside it); inside the image for image volumes"},
	"spec.containers[*].volumeMounts[*].mountPropagation":  {Honoured, "`Bidirectional` for privileged containers only"},
	"spec.containers[*].volumeMounts[*].subPathExpr":       {Honoured, "a reference to an unset or empty variable is an error, as with the kubelet"},
	"spec.containers[*].volumeMounts[*].bindMountOptions":  {Ignored, "not applied yet"},

	"spec.containers[*].securityContext.capabilities":             {Honoured, ""},
	"spec.containers[*].securityContext.privileged":               {Honoured, ""},
	"spec.containers[*].securityContext.seLinuxOptions":           {Honoured, ""},
	"spec.containers[*].securityContext.windowsOptions":           {Ignored, "Linux only"},
	"spec.containers[*].securityContext.runAsUser":                {Honoured, ""},
	"spec.containers[*].securityContext.runAsGroup":               {Honoured, ""},
	"spec.containers[*].securityContext.runAsNonRoot":             {Honoured, "checked against the image's user"},
	"spec.containers[*].securityContext.readOnlyRootFilesystem":   {Honoured, ""},
	"spec.containers[*].securityContext.allowPrivilegeEscalation": {Honoured, ""},
	"spec.containers[*].securityContext.procMount":                {Honoured, ""},
	"spec.containers[*].securityContext.seccompProfile":           {Honoured, ""},
	"spec.containers[*].securityContext.appArmorProfile":          {Ignored, "not applied yet"},

	"spec.securityContext.seLinuxOptions":           {Honoured, ""},
	"spec.securityContext.windowsOptions":           {Ignored, "Linux only"},
	"spec.securityContext.runAsUser":                {Honoured, ""},
	"spec.securityContext.runAsGroup":               {Honoured, ""},
	"spec.securityContext.runAsNonRoot":             {Honoured, ""},
	"spec.securityContext.supplementalGroups":       {Honoured, ""},
	"spec.securityContext.supplementalGroupsPolicy": {Ignored, "not applied yet"},
	"spec.securityContext.fsGroup":                  {Honoured, "on emptyDir volumes"},
	"spec.securityContext.sysctls":                  {Honoured, ""},
	"spec.securityContext.fsGroupChangePolicy":      {Ignored, "only emptyDirs, which berth creates, change owner"},
	"spec.securityContext.seccompProfile":           {Honoured, ""},
	"spec.securityContext.appArmorProfile":          {Ignored, "not applied yet"},
	"spec.securityContext.seLinuxChangePolicy":      {Ignored, "not applied yet"},

	"spec.volumes[*].hostPath":              {Honoured, "with the kubelet's type checks"},
	"spec.volumes[*].emptyDir":              {Honoured, "`medium: Memory` is a tmpfs bounded by the pod's memory limit"},
	"spec.volumes[*].image":                 {Honoured, "KEP-4639: an OCI image mounted read-only; needs containerd >= 2.1, refused with the reason otherwise"},
	"spec.volumes[*].secret":                {Honoured, "a Secret of the pod's own source and namespace, on a tmpfs"},
	"spec.volumes[*].configMap":             {Honoured, "a ConfigMap of the pod's own source and namespace; edits swap `..data` in place"},
	"spec.volumes[*].projected":             {Rejected, "service-account tokens, ConfigMaps and Secrets live in an API server"},
	"spec.volumes[*].downwardAPI":           {Rejected, "not supported yet; use env fieldRef"},
	"spec.volumes[*].persistentVolumeClaim": {Rejected, "claims are bound by an API server"},
	"spec.volumes[*].ephemeral":             {Rejected, "claims are bound by an API server"},
	"spec.volumes[*].csi":                   {Rejected, "no CSI drivers on a standalone node"},
	"spec.volumes[*].gitRepo":               {Rejected, "deprecated upstream; clone in an init container"},
	"spec.volumes[*].nfs":                   {Rejected, "mount it on the host and use hostPath"},
	"spec.volumes[*].iscsi":                 {Rejected, "mount it on the host and use hostPath"},
	"spec.volumes[*].fc":                    {Rejected, "mount it on the host and use hostPath"},
	"spec.volumes[*].rbd":                   {Rejected, "mount it on the host and use hostPath"},
	"spec.volumes[*].cephfs":                {Rejected, "mount it on the host and use hostPath"},
	"spec.volumes[*].glusterfs":             {Rejected, "mount it on the host and use hostPath"},
	"spec.volumes[*].flexVolume":            {Rejected, "no volume plugins on a standalone node"},
	"spec.volumes[*].gcePersistentDisk":     {Rejected, "cloud disks need a cloud provider"},
	"spec.volumes[*].awsElasticBlockStore":  {Rejected, "cloud disks need a cloud provider"},
	"spec.volumes[*].azureDisk":             {Rejected, "cloud disks need a cloud provider"},
	"spec.volumes[*].azureFile":             {Rejected, "cloud disks need a cloud provider"},
	"spec.volumes[*].cinder":                {Rejected, "cloud disks need a cloud provider"},
	"spec.volumes[*].vsphereVolume":         {Rejected, "cloud disks need a cloud provider"},
	"spec.volumes[*].photonPersistentDisk":  {Rejected, "removed upstream"},
	"spec.volumes[*].flocker":               {Rejected, "removed upstream"},
	"spec.volumes[*].quobyte":               {Rejected, "removed upstream"},
	"spec.volumes[*].portworxVolume":        {Rejected, "use its CSI driver on a cluster"},
	"spec.volumes[*].scaleIO":               {Rejected, "removed upstream"},
	"spec.volumes[*].storageos":             {Rejected, "removed upstream"},
}
