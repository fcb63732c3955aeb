package main

import (
	"errors"

	"github.com/tune-ml/tune/tensor"
)

func isNoDevice(err error) bool { return errors.Is(err, tensor.ErrNoDevice) }
