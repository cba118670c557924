import { SeedRolesAndLocks1795340070000 } from '../common/1795340070000-SeedRolesAndLocks.js';
import { Init1795340060761 } from './1795340060761-Init.js';
import { Clusters1795340841221 } from './1795340841221-Clusters.js';
import { Leases1795342462821 } from './1795342462821-Leases.js';
import { AuditEvents1795352013567 } from './1795352013567-AuditEvents.js';

/** In order. New migrations are generated with `npm run migration:generate` and added here. */
export const SQLITE_MIGRATIONS = [
  Init1795340060761,
  SeedRolesAndLocks1795340070000,
  Clusters1795340841221,
  Leases1795342462821,
  AuditEvents1795352013567,
];
