package dist

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestShardMatchesDistributedSampler checks Shard against torch.utils.data.DistributedSampler's rule
// (drop_last=False): pad with the order's own first indices to ceil(n/world)·world, then take every
// world-th index from rank.
func TestShardMatchesDistributedSampler(t *testing.T) {
	order := []int{7, 3, 9, 0, 5, 1, 8, 2, 6, 4} // one epoch's shuffled order, the same on every rank
	want := [][]int{{7, 5, 6}, {3, 1, 4}, {9, 8, 7}, {0, 2, 3}}
	for r := range 4 {
		if got := Shard(order, r, 4); !reflect.DeepEqual(got, want[r]) {
			t.Errorf("rank %d: %v, want %v", r, got, want[r])
		}
	}
	// Fewer examples than ranks: the padding repeats the order more than once.
	short := []int{1, 0}
	for r, w := range [][]int{{1}, {0}, {1}, {0}, {1}} {
		if got := Shard(short, r, 5); !reflect.DeepEqual(got, w) {
			t.Errorf("n=2 world=5 rank %d: %v, want %v", r, got, w)
		}
	}
	if got := Shard(order, 0, 1); !reflect.DeepEqual(got, order) {
		t.Errorf("world 1: %v", got)
	}
	if got := Shard(nil, 1, 3); len(got) != 0 {
		t.Errorf("empty order: %v", got)
	}
}

// TestShardCoversEveryExample checks, for many sizes, that every rank gets ShardLen indices, that together
// they cover every example, and that only the padding (ShardLen·world − n indices) repeats.
func TestShardCoversEveryExample(t *testing.T) {
	for world := 1; world <= 8; world++ {
		for n := 1; n <= 40; n++ {
			order := rand.New(rand.NewPCG(uint64(n), uint64(world))).Perm(n)
			seen := map[int]int{}
			for r := range world {
				s := Shard(order, r, world)
				if len(s) != ShardLen(n, world) {
					t.Fatalf("n=%d world=%d rank %d: %d indices, want %d", n, world, r, len(s), ShardLen(n, world))
				}
				for _, i := range s {
					seen[i]++
				}
			}
			extra := 0
			for i := range n {
				if seen[i] == 0 {
					t.Fatalf("n=%d world=%d: example %d on no rank", n, world, i)
				}
				extra += seen[i] - 1
			}
			if extra != ShardLen(n, world)*world-n {
				t.Fatalf("n=%d world=%d: %d repeated indices, want %d", n, world, extra, ShardLen(n, world)*world-n)
			}
		}
	}
}
