import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { AccessRule } from '../access/rules.js';

export const ROLE_ADMIN = 'admin';
export const ROLE_VIEWER = 'viewer';
/** A role's name: `admin`, `viewer`, or a custom role's name (see ROLE_NAME_PATTERN). */
export type RoleName = string;
/**
 * Role names: lower-case letters, digits, `.`, `_`, `-`, 1–32 characters, starting and ending with a
 * letter or digit. They travel to clusters in `Impersonate-Group: cas:role:<name>`, so the charset is
 * kept narrow on purpose.
 */
export const ROLE_NAME_PATTERN = /^[a-z0-9](?:[a-z0-9._-]{0,30}[a-z0-9])?$/;

@Entity('roles')
export class RoleEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 32, unique: true })
  name: RoleName;

  @Column({ type: 'varchar', length: 200, default: '' })
  description: string;

  /** `admin` and `viewer`: they cannot be changed or deleted. */
  @Column({ type: 'boolean', default: false })
  builtin: boolean;

  /** The role's rules, as JSON (`AccessRule[]`): read on every request with the caller, so kept in the row. */
  @Column({
    type: 'text',
    transformer: {
      to: (value: AccessRule[] | undefined) => (value === undefined ? undefined : JSON.stringify(value)),
      from: (value: string | null) => (value ? (JSON.parse(value) as AccessRule[]) : []),
    },
  })
  rules: AccessRule[];
}
