import { SeedRolesAndLocks1795340070000 } from '../common/1795340070000-SeedRolesAndLocks.js';
import { Init1795340064051 } from './1795340064051-Init.js';
import { Clusters1795340847552 } from './1795340847552-Clusters.js';
import { Leases1795342471261 } from './1795342471261-Leases.js';
import { RoleRulesKeyOwners1795351998879 } from './1795351998879-RoleRulesKeyOwners.js';
import { AuditEvents1795352013583 } from './1795352013583-AuditEvents.js';
import { ExternalUsers1795352066152 } from './1795352066152-ExternalUsers.js';
import { MetricsStatus1795352102411 } from './1795352102411-MetricsStatus.js';
import { UserListIndexes1795353245680 } from './1795353245680-UserListIndexes.js';
import { UserSearchKeyIndex1795380000000 } from './1795380000000-UserSearchKeyIndex.js';
import { UserSearchIndexesDirect1795390000000 } from './1795390000000-UserSearchIndexesDirect.js';
import { UserListIdPageIndexes1795400000000 } from './1795400000000-UserListIdPageIndexes.js';
import { UserCount1795410000000 } from './1795410000000-UserCount.js';
import { AuditEventCount1795420000000 } from './1795420000000-AuditEventCount.js';
import { ApiKeyNamesPerOwner1795420000001 } from './1795420000001-ApiKeyNamesPerOwner.js';
import { AuditSessionDetail1795430000000 } from './1795430000000-AuditSessionDetail.js';
import { AuditObjectStatusIndexes1795446410000 } from './1795446410000-AuditObjectStatusIndexes.js';
import { Replicas1795440000000 } from './1795440000000-Replicas.js';

/** In order. New migrations are generated with `npm run migration:generate` and added here. */
export const POSTGRES_MIGRATIONS = [
  Init1795340064051,
  SeedRolesAndLocks1795340070000,
  Clusters1795340847552,
  Leases1795342471261,
  RoleRulesKeyOwners1795351998879,
  AuditEvents1795352013583,
  ExternalUsers1795352066152,
  MetricsStatus1795352102411,
  UserListIndexes1795353245680,
  UserSearchKeyIndex1795380000000,
  UserSearchIndexesDirect1795390000000,
  UserListIdPageIndexes1795400000000,
  UserCount1795410000000,
  AuditEventCount1795420000000,
  ApiKeyNamesPerOwner1795420000001,
  AuditSessionDetail1795430000000,
  AuditObjectStatusIndexes1795446410000,
  Replicas1795440000000,
];
