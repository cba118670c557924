import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { dataSourceOptions } from './data-source.js';
import { LeaseEntity } from './lease.entity.js';
import { Leases } from './leases.js';
import { LocalWrites } from './local-writes.js';
import { ReplicaEntity } from './replica.entity.js';
import { Replicas } from './replicas.js';
import { Transactions } from './transactions.js';

@Global()
@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => ({ ...dataSourceOptions(config), migrationsRun: true }),
    }),
    TypeOrmModule.forFeature([LeaseEntity, ReplicaEntity]),
  ],
  providers: [Transactions, Leases, LocalWrites, Replicas],
  exports: [Transactions, Leases, LocalWrites, Replicas],
})
export class DatabaseModule {}
