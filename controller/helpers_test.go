package controller

import (
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func simPool(name string, max int) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "sim", InstanceType: "p4d.24xlarge", GPUsPerNode: 8, Capacity: fleet.OnDemand,
		PricePerHour: 32, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Max: max}
}
