import { AuditEventEntity } from './audit/audit-event.entity.js';
import { ApiKeyEntity } from './auth/api-key.entity.js';
import { LoginThrottleEntity } from './auth/login-throttle.entity.js';
import { SessionEntity } from './auth/session.entity.js';
import { ClusterEntity } from './clusters/cluster.entity.js';
import { RoleEntity } from './users/role.entity.js';
import { UserEntity } from './users/user.entity.js';
import { AppLockEntity } from './database/app-lock.entity.js';
import { LeaseEntity } from './database/lease.entity.js';
import { ReplicaEntity } from './database/replica.entity.js';

/**
 * Every entity of the service, the features' and the database's own: the application module hands it to
 * the database module, and the migration generator to the data source. It lives above the features so
 * that database/ imports none of them.
 */
export const ENTITIES = [
  AppLockEntity,
  LeaseEntity,
  RoleEntity,
  UserEntity,
  SessionEntity,
  ApiKeyEntity,
  LoginThrottleEntity,
  ClusterEntity,
  AuditEventEntity,
  ReplicaEntity,
];
