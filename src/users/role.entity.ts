import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

export const ROLE_ADMIN = 'admin';
export const ROLE_VIEWER = 'viewer';
export type RoleName = typeof ROLE_ADMIN | typeof ROLE_VIEWER;
export const ROLE_NAMES: RoleName[] = [ROLE_ADMIN, ROLE_VIEWER];

@Entity('roles')
export class RoleEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 32, unique: true })
  name: RoleName;

  @Column({ type: 'varchar', length: 200, default: '' })
  description: string;
}
