import {
  Column,
  CreateDateColumn,
  Entity,
  Index,
  JoinTable,
  ManyToMany,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';
import { RoleEntity } from './role.entity.js';

export const PROVIDER_PASSWORD = 'password';

/** A user of a single sign-on provider is the provider's subject (`sub`), whatever its username becomes. */
@Entity('users')
@Index('uq_users_provider_subject', ['provider', 'subject'], { unique: true })
export class UserEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 64 })
  username: string;

  /** Lower-cased username: uniqueness and look-ups ignore case. */
  @Column({ name: 'username_key', type: 'varchar', length: 64, unique: true })
  usernameKey: string;

  /** `password`, or `oidc:<id>` for a user of an OpenID Connect provider. */
  @Column({ type: 'varchar', length: 32, default: PROVIDER_PASSWORD })
  provider: string;

  /** The provider's `sub` for single sign-on users; null for password users. */
  @Column({ type: 'varchar', length: 255, nullable: true })
  subject: string | null;

  /** The user create_super_user made: the one password login left when CAS_PASSWORD_LOGIN=false (break-glass). */
  @Column({ name: 'super_user', type: 'boolean', default: false })
  superUser: boolean;

  @Column({ type: 'varchar', length: 128 })
  name: string;

  @Column({ name: 'password_hash', type: 'varchar', length: 255, nullable: true, select: false })
  passwordHash: string | null;

  @Column({ type: 'boolean', default: true })
  enabled: boolean;

  @Column({ name: 'avatar_url', type: 'varchar', length: 2048, nullable: true })
  avatarUrl: string | null;

  @Column({ name: 'last_login_at', type: Date, nullable: true })
  lastLoginAt: Date | null;

  @CreateDateColumn({ name: 'created_at' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at' })
  updatedAt: Date;

  @ManyToMany(() => RoleEntity, { eager: false })
  @JoinTable({
    name: 'user_roles',
    joinColumn: { name: 'user_id', referencedColumnName: 'id', foreignKeyConstraintName: 'fk_user_roles_user' },
    inverseJoinColumn: { name: 'role_id', referencedColumnName: 'id', foreignKeyConstraintName: 'fk_user_roles_role' },
  })
  roles: RoleEntity[];
}
