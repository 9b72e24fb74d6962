//go:build !linux

package wan

import (
	"errors"
	"os"
)

var errNotLinux = errors.New("they are Linux's")

func checkSystem() error { return errNotLinux }

func openTUN(string) (*os.File, error) { return nil, errNotLinux }

func inNetns(string, func() error) error { return errNotLinux }
