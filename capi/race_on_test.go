//go:build cgo && race

package main

// raceEnabled: the race detector's shadow memory makes RSS measurements meaningless.
const raceEnabled = true
