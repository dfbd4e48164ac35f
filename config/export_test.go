package config

// PoolDefaults are the pools' defaults, for the tests outside the package.
var PoolDefaults = poolDefaults
