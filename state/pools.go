package state

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
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
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, p := range pools {
			if p.Name == "" {
				return fmt.Errorf("state: pool record with no name: %+v", p)
			}
			if err := putJSON(tx.Bucket(bucketPools), p.Name, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// Pools returns the pools' last records, by name.
func (s *Store) Pools() ([]PoolRecord, error) { return all[PoolRecord](s, bucketPools) }
