package api

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/bench/heapsample"
)

// BenchmarkAPIPodsConcurrent: 16 clients read /pods at once with 10,000
// pods, as a monitoring fleet or a loop of `berth pods` would. It reports
// the peak heap in use while they do (sampled), the figure that grew with
// concurrency when each answer was built and encoded whole.
func BenchmarkAPIPodsConcurrent(b *testing.B) {
	const pods, clients = 10000, 16
	bed := newAPIBed(b)
	for i := range pods {
		pod, st := webPod()
		pod.Name = fmt.Sprintf("web%05d-node1", i)
		pod.UID = types.UID(fmt.Sprintf("uid-%05d", i))
		pod.Labels = map[string]string{"app": "web", "tier": "frontend"}
		pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
		st.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(apiT0)}}
		bed.pods.status.Set(pod, st)
	}
	report := heapsample.Start(b, 5*time.Millisecond)
	for range b.N {
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := bed.unix.Get("http://berth/pods")
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				io.Copy(io.Discard, resp.Body)
			}()
		}
		wg.Wait()
	}
	report()
}
