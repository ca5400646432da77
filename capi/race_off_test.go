//go:build cgo && !race

package main

const raceEnabled = false
