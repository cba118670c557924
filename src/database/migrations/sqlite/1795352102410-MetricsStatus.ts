import { MigrationInterface, QueryRunner } from 'typeorm';

export class MetricsStatus1795352102410 implements MigrationInterface {
  name = 'MetricsStatus1795352102410';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "clusters" ADD COLUMN "metrics_status" varchar(16) NOT NULL DEFAULT ('unreachable')`,
    );
    await queryRunner.query(`ALTER TABLE "clusters" ADD COLUMN "metrics_error" varchar(1024)`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "clusters" DROP COLUMN "metrics_error"`);
    await queryRunner.query(`ALTER TABLE "clusters" DROP COLUMN "metrics_status"`);
  }
}
