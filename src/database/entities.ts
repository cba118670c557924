import { AuditEventEntity } from '../audit/audit-event.entity.js';
import { ApiKeyEntity } from '../auth/api-key.entity.js';
import { LoginThrottleEntity } from '../auth/login-throttle.entity.js';
import { SessionEntity } from '../auth/session.entity.js';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { RoleEntity } from '../users/role.entity.js';
import { UserEntity } from '../users/user.entity.js';
import { AppLockEntity } from './app-lock.entity.js';
import { LeaseEntity } from './lease.entity.js';
import { ReplicaEntity } from './replica.entity.js';

/** Every entity of the service; the data source and the migration generator both use this list. */
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
