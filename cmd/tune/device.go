package main

import (
	"errors"

	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/tensor"
)

func isNoDevice(err error) bool { return errors.Is(err, tensor.ErrNoDevice) }

// openDevice opens the backend a --device flag names. A value that is no device at all ("tpu", "gpu") is bad
// usage (exit status 2), as the recipe key device is; a well-formed device that is not there (cuda without a GPU)
// keeps recipes.OpenDevice's error, from which the exit status 3 comes.
func openDevice(device string) (tensor.Backend, error) {
	if device != "" {
		if err := recipes.CheckDevice(device); err != nil {
			return nil, usagef("--device %s: %v", device, err)
		}
	}
	return recipes.OpenDevice(device)
}
