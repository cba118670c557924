import { SeedRolesAndLocks1795340070000 } from '../common/1795340070000-SeedRolesAndLocks.js';
import { Init1795340060761 } from './1795340060761-Init.js';
import { Clusters1795340841221 } from './1795340841221-Clusters.js';
import { Leases1795342462821 } from './1795342462821-Leases.js';
import { RoleRulesKeyOwners1795351998878 } from './1795351998878-RoleRulesKeyOwners.js';
import { AuditEvents1795352013567 } from './1795352013567-AuditEvents.js';
import { ExternalUsers1795352066152 } from './1795352066152-ExternalUsers.js';
import { MetricsStatus1795352102410 } from './1795352102410-MetricsStatus.js';
import { UserListIndexes1795353245680 } from './1795353245680-UserListIndexes.js';
import { AuditEventCount1795420000000 } from './1795420000000-AuditEventCount.js';
import { ApiKeyNamesPerOwner1795420000001 } from './1795420000001-ApiKeyNamesPerOwner.js';
import { AuditSessionDetail1795430000000 } from './1795430000000-AuditSessionDetail.js';
import { AuditObjectStatusIndexes1795446410000 } from './1795446410000-AuditObjectStatusIndexes.js';
import { Replicas1795440000000 } from './1795440000000-Replicas.js';

/** In order. New migrations are generated with `npm run migration:generate` and added here. */
export const SQLITE_MIGRATIONS = [
  Init1795340060761,
  SeedRolesAndLocks1795340070000,
  Clusters1795340841221,
  Leases1795342462821,
  RoleRulesKeyOwners1795351998878,
  AuditEvents1795352013567,
  ExternalUsers1795352066152,
  MetricsStatus1795352102410,
  UserListIndexes1795353245680,
  AuditEventCount1795420000000,
  ApiKeyNamesPerOwner1795420000001,
  AuditSessionDetail1795430000000,
  AuditObjectStatusIndexes1795446410000,
  Replicas1795440000000,
];
