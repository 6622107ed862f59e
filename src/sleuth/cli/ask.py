"""`sleuth ask` (owned by the strategies work; replaced there)."""
