import {
  Column,
  CreateDateColumn,
  Entity,
  Index,
  JoinColumn,
  JoinTable,
  ManyToMany,
  ManyToOne,
  PrimaryGeneratedColumn,
} from 'typeorm';
import { RoleEntity } from '../users/role.entity.js';
import { UserEntity } from '../users/user.entity.js';

@Entity('api_keys')
@Index('idx_api_keys_owner_name', ['ownerId', 'nameKey'], { unique: true })
export class ApiKeyEntity {
  @PrimaryGeneratedColumn()
  id: number;

  /**
   * Unique among its owner's keys, ignoring case (stored lower-cased in nameKey): not across users,
   * so a 409 tells nobody the names of other users' keys.
   */
  @Column({ type: 'varchar', length: 100 })
  name: string;

  @Column({ name: 'name_key', type: 'varchar', length: 100 })
  nameKey: string;

  /** The user the key acts for: it acts with its own roles intersected with the owner's current ones. */
  @Index('idx_api_keys_owner')
  @Column({ name: 'owner_id', type: 'integer' })
  ownerId: number;

  @ManyToOne(() => UserEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'owner_id', foreignKeyConstraintName: 'fk_api_keys_owner' })
  owner: UserEntity;

  @ManyToMany(() => RoleEntity)
  @JoinTable({
    name: 'api_key_roles',
    joinColumn: { name: 'api_key_id', referencedColumnName: 'id', foreignKeyConstraintName: 'fk_api_key_roles_key' },
    inverseJoinColumn: {
      name: 'role_id',
      referencedColumnName: 'id',
      foreignKeyConstraintName: 'fk_api_key_roles_role',
    },
  })
  roles: RoleEntity[];

  /** The first characters of the key, shown in listings so a person can tell keys apart. */
  @Column({ type: 'varchar', length: 16 })
  prefix: string;

  /** SHA-256 (hex) of the key; the key itself is never stored. */
  @Column({ name: 'key_hash', type: 'varchar', length: 64, unique: true, select: false })
  keyHash: string;

  @CreateDateColumn({ name: 'created_at' })
  createdAt: Date;

  /** Who created it: a username, or `apikey:<name>` when created with another key. */
  @Column({ name: 'created_by', type: 'varchar', length: 110, nullable: true })
  createdBy: string | null;

  @Column({ name: 'last_used_at', type: Date, nullable: true })
  lastUsedAt: Date | null;

  @Column({ name: 'expires_at', type: Date, nullable: true })
  expiresAt: Date | null;
}
