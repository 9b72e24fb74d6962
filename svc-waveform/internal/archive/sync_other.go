//go:build !linux

package archive

import (
	"os"
	"path/filepath"

	"shindo.dev/lib/atomicfile"
)

// syncAll syncs the day files open for writing and their directories
// (without syncfs(2), each file on its own). Files written and closed
// since the last checkpoint were synced when the cache closed them
// (closeDayFile); their directories are not, a weaker guarantee than on
// Linux, where the service runs.
func syncAll(root string, open map[string]*os.File) error {
	dirs := map[string]bool{root: true}
	for p, f := range open {
		if err := f.Sync(); err != nil {
			return err
		}
		for d := filepath.Dir(filepath.Join(root, p)); len(d) > len(root); d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if err := atomicfile.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// closeDayFile syncs a day file before the cache forgets it, since syncAll
// only reaches the files still open.
func closeDayFile(f *os.File) {
	f.Sync()
	f.Close()
}

// syncWithoutLock says whether syncAll may run while commits go on.
const syncWithoutLock = false
