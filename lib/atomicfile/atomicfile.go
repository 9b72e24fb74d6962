// Package atomicfile replaces files whole: a reader sees the old content
// or the new, never part of either, and after a crash the file is one or
// the other.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces name with data: written to a temporary file beside it,
// synced, renamed over it, and the directory synced so the rename
// survives a crash. perm is the new file's mode.
func Write(name string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone after the rename; left only on error
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(name))
}

// SyncDir makes the directory's entries (files created, renamed, removed
// in it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
