package state

import (
	"fmt"
	"math"
)

var bucketPools = []byte("pools")

// PoolRecord is a pool as the config last described it: what an orphan of
// the pool (its instances left running once the pool is gone from the
// config) has and costs, for the fleet's limits.
type PoolRecord struct {
	Name         string  `json:"name"`
	InstanceType string  `json:"instance_type,omitempty"`
	GPUsPerNode  int     `json:"gpus_per_node"`
	PricePerHour float64 `json:"price_per_hour"`
}

// PutPools records the pools as the config describes them, in one
// transaction, replacing their earlier records; the records of pools not
// named stay.
func (s *Store) PutPools(pools ...PoolRecord) error {
	for _, p := range pools {
		if err := checkPool(p); err != nil {
			return err
		}
	}
	return s.kv.update(func(tx kvTx) error {
		for _, p := range pools {
			if err := putJSON(tx.Bucket(bucketPools), p.Name, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkPool checks the fields a pool record must have: a name, and a
// price JSON can write (a finite number; the error is JSON's).
func checkPool(p PoolRecord) error {
	switch {
	case p.Name == "":
		return fmt.Errorf("state: pool record with no name: %+v", p)
	case math.IsNaN(p.PricePerHour) || math.IsInf(p.PricePerHour, 0):
		return fmt.Errorf("state: encoding %s: json: unsupported value: %v", p.Name, p.PricePerHour)
	}
	return nil
}

// Pools returns the pools' last records, by name.
func (s *Store) Pools() ([]PoolRecord, error) { return all[PoolRecord](s, bucketPools) }
