import {
  Column,
  CreateDateColumn,
  Entity,
  JoinTable,
  ManyToMany,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';
import { RoleEntity } from './role.entity.js';

export const PROVIDER_PASSWORD = 'password';

@Entity('users')
export class UserEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 64 })
  username: string;

  /** Lower-cased username: uniqueness and look-ups ignore case. */
  @Column({ name: 'username_key', type: 'varchar', length: 64, unique: true })
  usernameKey: string;

  @Column({ type: 'varchar', length: 32, default: PROVIDER_PASSWORD })
  provider: string;

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
