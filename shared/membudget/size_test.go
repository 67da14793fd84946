package membudget

import (
	"io/fs"
	"testing"
)

func TestCgroupLimit(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if v, ok := m[p]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
		ok    bool
	}{
		{"v2", map[string]string{"/sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30, true},
		{"v2 unlimited", map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, 0, false},
		{"v1", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, true},
		{"v1 unlimited", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"none", nil, 0, false},
		{"garbage", map[string]string{"/sys/fs/cgroup/memory.max": "lots"}, 0, false},
	} {
		got, ok := cgroupLimit(files(c.files))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
