package kernels

// ParkState says whether the device's executor waits for Notify now, and
// how many times it has parked so (the tests' evidence that an idle
// device wakes for nothing).
func (d *Device) ParkState() (parked bool, parks uint64) {
	return d.x.parked.Load(), d.x.parks.Load()
}
